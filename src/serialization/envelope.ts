/**
 * The versioned envelope around every stored snapshot: a msgpack array
 * `['xr', FORMAT_VERSION, kind, machineVersion, payload]`. The marker detects foreign data under
 * our key, the kind detects a record of another type, and the machine version says which state
 * machine wrote the payload.
 */
import { DefinitionError, DeserializationError } from '../errors/index.js';
import { preview } from '../internal/preview.js';
import { decode, encode } from './packr.js';

const MAGIC = 'xr';
/** Layout version of the envelope itself (not of the payload). */
const FORMAT_VERSION = 1;
const FIELD_COUNT = 5;

/** A decoded envelope. */
export interface Envelope {
  readonly kind: string;
  readonly machineVersion: number;
  readonly payload: unknown;
}

/**
 * What the reader accepts: one kind and the machine versions this build can resume, or a
 * registry of kinds (kind -> machine versions). With one kind, a record of another kind is
 * foreign (non-retryable: the key was written for another purpose); with a registry, a kind it
 * does not list is retryable (a build that registers the kind can read it), like an unknown version.
 */
export type EnvelopeExpectation =
  | { readonly kind: string; readonly machineVersions: readonly number[] }
  | { readonly machines: Readonly<Record<string, readonly number[]>> };

/**
 * Encodes `payload` in an envelope marked with its kind and machine version.
 * @throws DefinitionError when `kind` is empty or `machineVersion` is not a non-negative integer.
 */
export function encodeEnvelope(kind: string, machineVersion: number, payload: unknown): Uint8Array {
  if (kind === '') throw new DefinitionError('envelope kind is empty: name the kind of record being stored');
  if (!Number.isSafeInteger(machineVersion) || machineVersion < 0) {
    throw new DefinitionError(`machine version ${machineVersion} is not a non-negative integer: bump it as 1, 2, 3, ...`);
  }
  return encode([MAGIC, FORMAT_VERSION, kind, machineVersion, payload]);
}

/**
 * Decodes an envelope written by {@link encodeEnvelope} and checks it against `expected`.
 * @throws DeserializationError when the bytes are truncated or foreign, the kind is not the one
 * expected (or not in the registry), or the machine version is not one this build knows for the
 * kind. The message says which, and what to do. A format, kind (with a registry) or machine
 * version this build does not know is `retryable`: another build can read it.
 */
export function decodeEnvelope(bytes: Uint8Array, expected: EnvelopeExpectation): Envelope {
  const single = 'kind' in expected ? expected : undefined;
  let what = single === undefined ? 'stored snapshot' : `stored ${single.kind} snapshot`;
  let value: unknown;
  try {
    value = decode(bytes);
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new DeserializationError(`${what} could not be decoded: ${reason}`, { cause: error });
  }
  if (!Array.isArray(value) || value.length !== FIELD_COUNT || value[0] !== MAGIC) {
    throw new DeserializationError(
      `${what} is not an xreactor envelope (found ${preview(value)}): ` +
        'the key holds data another program wrote; check the key prefix, or discard the key',
    );
  }
  const [, format, kind, machineVersion, payload] = value as unknown[];
  if (format !== FORMAT_VERSION) {
    throw new DeserializationError(
      `${what} has envelope format ${preview(format)}; this build reads format ${FORMAT_VERSION}: ` +
        `deploy a build that reads format ${preview(format)}, or discard the execution`,
      { retryable: true },
    );
  }
  let versions: readonly number[];
  if (single !== undefined) {
    if (kind !== single.kind) {
      throw new DeserializationError(
        `${what} holds a record of kind ${preview(kind)}, not "${single.kind}": ` +
          'the key was written for another purpose; check the key builder',
      );
    }
    versions = single.machineVersions;
  } else {
    const machines = (expected as { readonly machines: Readonly<Record<string, readonly number[]>> }).machines;
    if (typeof kind !== 'string' || kind === '') {
      throw new DeserializationError(`${what} names kind ${preview(kind)}, not an actor kind: the key holds data another program wrote; discard it`);
    }
    // Own keys only: a kind named like an Object.prototype member ("constructor") is not registered.
    if (!Object.hasOwn(machines, kind)) {
      const known = Object.keys(machines);
      throw new DeserializationError(
        `${what} is of kind ${preview(kind)}, which this build does not know (it knows ${known.length === 0 ? 'no kind' : known.map((k) => JSON.stringify(k)).join(', ')}): ` +
          `a build that knows kind ${preview(kind)} must advance it; deploy one, or discard the actor`,
        { retryable: true },
      );
    }
    versions = machines[kind]!;
    what = `stored ${kind} snapshot`;
  }
  if (typeof machineVersion !== 'number' || !versions.includes(machineVersion)) {
    const known = versions.length === 0 ? 'no version' : versions.join(', ');
    throw new DeserializationError(
      `${what} has machine version ${preview(machineVersion)}; this build knows ${known}: ` +
        `deploy a build that knows version ${preview(machineVersion)}, or discard the ${single === undefined ? 'actor' : 'execution'}`,
      { retryable: true },
    );
  }
  return { kind, machineVersion, payload };
}

