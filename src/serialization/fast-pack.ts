/**
 * A fast path in front of the Packr for the values xreactor encodes most: plain objects, arrays,
 * ASCII strings, numbers, booleans and null (snapshots, outboxes, undo and trace entries). It
 * writes exactly the bytes `packr.pack` writes for them with our options (maps with their
 * smallest header, object keys in `Object.keys` order, integers of 32 bits or less in their
 * smallest form, every other number as float64), and hands every other value (undefined, Dates,
 * Errors, bigints, Sets, Maps, typed arrays, class instances, objects without `Object` as their
 * constructor, strings with a non-ASCII character) to `packr.pack` and copies its bytes in place:
 * msgpack is written value by value, so the result is byte for byte what `packr.pack` gives for
 * the whole value. Only this file and `packr.ts` know the wire format; `encode` uses it.
 *
 * Why: one generic encoder sees every shape the process writes, and its property reads go
 * megamorphic; an execution snapshot took 9–10 µs. This writer caches the bytes of object keys
 * (the same few dozen names in every snapshot) and writes ASCII strings byte by byte.
 */
import { constants as bufferConstants } from 'node:buffer';

/** The generic encoder for what this writer does not write itself. */
export type FallbackPack = (value: unknown) => Uint8Array;

/** Object keys whose bytes are kept: names of up to this many characters, this many names at most (then the cache starts again). */
const KEY_CACHE_MAX_LENGTH = 64;
const KEY_CACHE_MAX_ENTRIES = 4096;
/** Strings this long or longer are written by Buffer's native code; shorter ones by a loop, which writes a one-byte header (so this is at most 32). */
const NATIVE_STRING_MIN = 8;
/** The first pool, and the least a new one holds. */
const POOL_BYTES = 16_384;
/** A pool larger than this (grown for one large value) is not written into again: the next value starts a new one. */
const POOL_REUSE_MAX = 1_048_576;
/** Past this size a pool grows by a quarter instead of doubling (as msgpackr's does). */
const POOL_DOUBLING_MAX = 64 * 1_048_576;
/**
 * Objects and arrays nested deeper than this are handed to the generic encoder whole: its own
 * stack limit then decides what is too deep to write, as it did before this writer (a value this
 * writer took and `decode` could not read back would be stored unreadable).
 */
const DEPTH_MAX = 64;

/** Where a value written after byte `at` starts: the next multiple of 8 (exact for any safe integer, unlike `& ~7`). */
export function alignedStart(at: number): number {
  return at + ((8 - (at % 8)) % 8);
}

export class FastPacker {
  readonly #fallback: FallbackPack;
  readonly #keys = new Map<string, Uint8Array>();
  #pool: Buffer = Buffer.allocUnsafe(POOL_BYTES);
  #view = new DataView(this.#pool.buffer, this.#pool.byteOffset, this.#pool.byteLength);
  /** Where the value being written starts, and the next byte to write. */
  #start = 0;
  #at = 0;
  /** A value is being written (see {@link pack}). */
  #writing = false;

  constructor(fallback: FallbackPack) {
    this.#fallback = fallback;
  }

  /**
   * The msgpack bytes of `value`: a view of this packer's pool that nothing writes again (as
   * `packr.pack` returns a view of its own buffer).
   */
  pack(value: unknown): Buffer {
    if (this.#writing) {
      // Called again while writing a value (a toJSON the generic encoder calls may encode):
      // the generic encoder writes this one, and the value in progress stays where it is.
      const bytes = this.#fallback(value);
      return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    }
    // Word-aligned starts, as msgpackr does; a pool too full for a small value, or one grown
    // large for an earlier value, is replaced (the views returned from it keep it alive).
    this.#start = alignedStart(this.#at);
    if (this.#pool.length - this.#start < 1024 || this.#pool.length > POOL_REUSE_MAX) this.#replace(POOL_BYTES, 0);
    this.#at = this.#start;
    this.#writing = true;
    try {
      this.#value(value, 0);
    } catch (error) {
      this.#at = this.#start;
      throw error;
    } finally {
      this.#writing = false;
    }
    return this.#pool.subarray(this.#start, this.#at);
  }

  /** Room for `bytes` more bytes at `#at` (the value written so far moves to a new pool). */
  #room(bytes: number): void {
    if (this.#at + bytes <= this.#pool.length) return;
    const needed = this.#at - this.#start + bytes;
    const grown = needed <= POOL_DOUBLING_MAX ? needed * 2 : Math.ceil(needed * 1.25);
    this.#replace(Math.max(POOL_BYTES, needed, Math.min(grown, bufferConstants.MAX_LENGTH)), this.#at - this.#start);
  }

  #replace(size: number, keep: number): void {
    const next = Buffer.allocUnsafe(size);
    const view = new DataView(next.buffer, next.byteOffset, next.byteLength);
    if (keep > 0) this.#pool.copy(next, 0, this.#start, this.#start + keep);
    this.#pool = next;
    this.#view = view;
    this.#start = 0;
    this.#at = keep;
  }

  #value(value: unknown, depth: number): void {
    switch (typeof value) {
      case 'string':
        this.#string(value);
        return;
      case 'number':
        this.#number(value);
        return;
      case 'boolean':
        this.#room(1);
        this.#pool[this.#at++] = value ? 0xc3 : 0xc2;
        return;
      case 'object':
        if (value === null) {
          this.#room(1);
          this.#pool[this.#at++] = 0xc0;
          return;
        }
        if (depth < DEPTH_MAX) {
          // Read once, as the generic encoder reads it once (a getter may answer differently).
          const constructor: unknown = value.constructor;
          if (constructor === Object) {
            this.#object(value as Record<string, unknown>, depth + 1);
            return;
          }
          if (constructor === Array) {
            this.#array(value as unknown[], depth + 1);
            return;
          }
        }
        this.#other(value);
        return;
      default:
        this.#other(value);
    }
  }

  /** What the generic encoder writes for `value`, copied in place. */
  #other(value: unknown): void {
    const bytes = this.#fallback(value);
    this.#room(bytes.length);
    this.#pool.set(bytes, this.#at);
    this.#at += bytes.length;
  }

  #number(value: number): void {
    this.#room(9);
    const pool = this.#pool;
    if (value >>> 0 === value) {
      if (value < 0x80) pool[this.#at++] = value;
      else if (value < 0x100) {
        pool[this.#at++] = 0xcc;
        pool[this.#at++] = value;
      } else if (value < 0x10000) {
        pool[this.#at++] = 0xcd;
        pool[this.#at++] = value >> 8;
        pool[this.#at++] = value & 0xff;
      } else {
        pool[this.#at++] = 0xce;
        this.#view.setUint32(this.#at, value);
        this.#at += 4;
      }
    } else if (value >> 0 === value) {
      if (value >= -0x20) pool[this.#at++] = 0x100 + value;
      else if (value >= -0x80) {
        pool[this.#at++] = 0xd0;
        pool[this.#at++] = value + 0x100;
      } else if (value >= -0x8000) {
        pool[this.#at++] = 0xd1;
        this.#view.setInt16(this.#at, value);
        this.#at += 2;
      } else {
        pool[this.#at++] = 0xd2;
        this.#view.setInt32(this.#at, value);
        this.#at += 4;
      }
    } else {
      pool[this.#at++] = 0xcb;
      this.#view.setFloat64(this.#at, value);
      this.#at += 8;
    }
  }

  /** A string of ASCII characters; any other goes to the generic encoder. */
  #string(value: string): void {
    const length = value.length;
    if (length >= NATIVE_STRING_MIN) {
      // Written as UTF-8 by Buffer's native code behind a header sized for one byte per character:
      // it is all ASCII exactly when that many bytes were written (any other character, a lone
      // surrogate too, takes more), and then the header is right; else the generic encoder
      // writes it over.
      this.#room(length * 3 + 5);
      const header = length < 0x20 ? 1 : length < 0x100 ? 2 : length < 0x10000 ? 3 : 5;
      if (this.#pool.write(value, this.#at + header, 'utf8') !== length) {
        this.#other(value);
        return;
      }
      this.#header(length, 0x20, 0xa0, 0xd9, 0xda);
      this.#at += length;
      return;
    }
    this.#room(length + 1);
    const pool = this.#pool;
    const header = this.#at;
    let at = header + 1;
    for (let i = 0; i < length; i++) {
      const c = value.charCodeAt(i);
      if (c >= 0x80) {
        this.#other(value);
        return;
      }
      pool[at++] = c;
    }
    pool[header] = 0xa0 | length;
    this.#at = at;
  }

  /** An object key: its bytes from the cache, or written (and kept when it is short). */
  #key(key: string): void {
    const cached = this.#keys.get(key);
    if (cached !== undefined) {
      this.#room(cached.length);
      this.#pool.set(cached, this.#at);
      this.#at += cached.length;
      return;
    }
    // Relative to the value's start: writing the key may move the value to a new pool.
    const from = this.#at - this.#start;
    this.#string(key);
    if (key.length > KEY_CACHE_MAX_LENGTH) return;
    // Full (ids used as keys in user data, say): started again, so the names in use come back.
    if (this.#keys.size >= KEY_CACHE_MAX_ENTRIES) this.#keys.clear();
    this.#keys.set(key, Uint8Array.from(this.#pool.subarray(this.#start + from, this.#at)));
  }

  #object(object: Record<string, unknown>, depth: number): void {
    const keys = Object.keys(object);
    const length = keys.length;
    this.#room(5);
    this.#header(length, 0x10, 0x80, undefined, 0xde);
    for (let i = 0; i < length; i++) {
      const key = keys[i]!;
      this.#key(key);
      this.#value(object[key], depth);
    }
  }

  #array(array: readonly unknown[], depth: number): void {
    const length = array.length;
    this.#room(5);
    this.#header(length, 0x10, 0x90, undefined, 0xdc);
    for (let i = 0; i < length; i++) this.#value(array[i], depth);
  }

  /**
   * The smallest header for a string, map or array of `length`: `fix | length` under `fixLimit`,
   * then an 8-bit length after `marker8` (strings only), a 16-bit one after `marker16`, a 32-bit
   * one after the marker that follows it (msgpack numbers them in that order).
   */
  #header(length: number, fixLimit: number, fix: number, marker8: number | undefined, marker16: number): void {
    const pool = this.#pool;
    if (length < fixLimit) pool[this.#at++] = fix | length;
    else if (marker8 !== undefined && length < 0x100) {
      pool[this.#at++] = marker8;
      pool[this.#at++] = length;
    } else if (length < 0x10000) {
      pool[this.#at++] = marker16;
      pool[this.#at++] = length >> 8;
      pool[this.#at++] = length & 0xff;
    } else {
      pool[this.#at++] = marker16 + 1;
      this.#view.setUint32(this.#at, length);
      this.#at += 4;
    }
  }
}
