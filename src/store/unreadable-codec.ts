/**
 * The stored form of an {@link UnreadableRecord} (`Store.markUnreadable`): msgpack
 * `{ code, message }`. Both adapters store exactly these bytes (on Redis, in the `unreadable`
 * field of the execution hash).
 */
import { DeserializationError } from '../errors/index.js';
import { decode, encode } from '../serialization/index.js';
import type { UnreadableRecord } from './store.js';

/** The bytes of an unreadable record: only its code and message. */
export function encodeUnreadable(record: UnreadableRecord): Uint8Array {
  return encode({ code: record.code, message: record.message });
}

/**
 * Reads the unreadable record of actor `id`.
 * @throws DeserializationError when the bytes are not an encoded `{ code, message }`.
 */
export function decodeUnreadable(id: string, bytes: Uint8Array): UnreadableRecord {
  const value = decode(bytes) as { code?: unknown; message?: unknown } | null;
  if (typeof value !== 'object' || value === null || typeof value.code !== 'string' || typeof value.message !== 'string') {
    throw new DeserializationError(`the unreadable record of actor ${id} is not { code, message }: the field holds data another program wrote; discard it`);
  }
  return { code: value.code, message: value.message };
}
