/**
 * The start payload of a fan-out map element (docs/design/map.md §19): what its map's throw
 * writes for each position (`MapWrites.starts`) and its start job carries (`JobSpec.start`), from
 * which a worker builds the element and creates it with its first commit. The map persists no
 * element: a position has an element actor once its start job ran. A fan-out rollback actor's
 * start payload (below) is carried by its start job alone: the map's started list and stored
 * batch size give it again after a crash.
 */
import type { ElementMapLink, ElementSpawn } from '../../machines/map-types.js';
import { DeserializationError } from '../errors/index.js';
import { decode, encode } from '../serialization/index.js';

/** The element reactor of a map, at the version and plan its map was started with. */
export interface ElementRef {
  readonly reactor: string;
  readonly version: number;
  readonly fingerprint: string;
}

/** What a fan-out element is built from at its start. */
export interface ElementStart {
  readonly element: ElementRef;
  /** Its lineage path (`[...ownerPath, step, index]`). */
  readonly path: readonly string[];
  readonly map: ElementMapLink;
  /** Its input, or the error building it from its item (the element then fails before its first step). */
  readonly spawn: ElementSpawn;
}

/** Encoded as one array: `[reactor, version, fingerprint, path, map link, 0 | 1, input | error]`. */
export function encodeElementStart(start: ElementStart): Uint8Array {
  const { element, spawn } = start;
  const rejected = 'error' in spawn;
  return encode([element.reactor, element.version, element.fingerprint, start.path, start.map, rejected ? 1 : 0, rejected ? spawn.error : spawn.input]);
}

/**
 * Decodes a start payload.
 * @throws DeserializationError when the bytes are not one (another build's layout, damage)
 */
export function decodeElementStart(id: string, bytes: Uint8Array): ElementStart {
  const value = decodePayload(`element ${id}`, bytes);
  if (!Array.isArray(value) || value.length !== 7) throw new DeserializationError(`the start payload of element ${id} is not one this build reads (expected 7 fields)`);
  const [reactor, version, fingerprint, path, map, rejected, data] = value as unknown[];
  const link = map as ElementMapLink | null;
  if (
    typeof reactor !== 'string' ||
    typeof version !== 'number' ||
    typeof fingerprint !== 'string' ||
    !Array.isArray(path) ||
    typeof link !== 'object' ||
    link === null ||
    typeof link.id !== 'string' ||
    typeof link.index !== 'number' ||
    (rejected !== 0 && rejected !== 1)
  ) {
    throw new DeserializationError(`the start payload of element ${id} is not one this build reads (a field has the wrong type)`);
  }
  const spawn: ElementSpawn = rejected === 1 ? { index: link.index, error: data as never } : { index: link.index, input: data };
  return { element: { reactor, version, fingerprint }, path: path as string[], map: link, spawn };
}

/**
 * What a fan-out rollback actor is built from at its start (docs/design/map.md §19): its map's
 * rollback throw persists no actor, and its start job carries this (with its map and position,
 * `JobSpec.start`); the worker builds the actor and creates it with its first commit.
 */
export interface RollbackStart {
  /** The map's owner reactor (recorded with the actor). */
  readonly reactor: string;
  /** The map step's name. */
  readonly step: string;
  /** The element it rolls back (the started list's entry at its position). */
  readonly index: number;
  readonly throw: number;
  readonly lastOfThrow: boolean;
}

/** Encoded as one array: `[reactor, step, index, throw, 0 | 1]`. */
export function encodeRollbackStart(start: RollbackStart): Uint8Array {
  return encode([start.reactor, start.step, start.index, start.throw, start.lastOfThrow ? 1 : 0]);
}

/**
 * Decodes a rollback actor's start payload.
 * @throws DeserializationError when the bytes are not one (another build's layout, damage)
 */
export function decodeRollbackStart(id: string, bytes: Uint8Array): RollbackStart {
  const value = decodePayload(`rollback actor ${id}`, bytes);
  if (!Array.isArray(value) || value.length !== 5) throw new DeserializationError(`the start payload of rollback actor ${id} is not one this build reads (expected 5 fields)`);
  const [reactor, step, index, thrown, last] = value as unknown[];
  if (typeof reactor !== 'string' || typeof step !== 'string' || !Number.isSafeInteger(index) || !Number.isSafeInteger(thrown) || (last !== 0 && last !== 1)) {
    throw new DeserializationError(`the start payload of rollback actor ${id} is not one this build reads (a field has the wrong type)`);
  }
  return { reactor, step, index: index as number, throw: thrown as number, lastOfThrow: last === 1 };
}

/** The decoded value of a start payload; unreadable msgpack is reported as the start payload of `whose`. */
function decodePayload(whose: string, bytes: Uint8Array): unknown {
  try {
    return decode(bytes);
  } catch (error) {
    if (!(error instanceof DeserializationError)) throw error;
    throw new DeserializationError(`the start payload of ${whose} is not one this build reads: ${error.message}`, { cause: error });
  }
}
