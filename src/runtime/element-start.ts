/**
 * The start payload of a fan-out map element (docs/design/map.md §19): what its map's throw
 * writes for each position (`MapWrites.starts`) and its start job carries (`JobSpec.start`), from
 * which a worker builds the element and creates it with its first commit. The map persists no
 * element: a position has an element actor once its start job ran.
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
  const value = decode(bytes);
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
