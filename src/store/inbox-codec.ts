/**
 * The stored form of an inbox entry: msgpack `{ event, dedupeKey }` (the seq is where it is
 * stored). Both adapters store exactly these bytes.
 */
import { DeserializationError, XreactorError } from '../errors/index.js';
import { decode, encode } from '../serialization/index.js';
import type { Inbox, InboxEntry, Signal } from './store.js';

/** The bytes of the inbox entry a signal leaves. */
export function encodeInboxEntry(signal: Signal): Uint8Array {
  return encode({ event: signal.event, dedupeKey: signal.dedupeKey });
}

/**
 * Reads an inbox entry stored at `seq` of actor `id`.
 * @throws DeserializationError when the bytes are not an encoded `{ event: { type }, dedupeKey }`.
 */
export function decodeInboxEntry(id: string, seq: number, bytes: Uint8Array): InboxEntry {
  const value = decode(bytes) as { event?: { type?: unknown }; dedupeKey?: unknown } | null;
  if (typeof value !== 'object' || value === null || typeof value.dedupeKey !== 'string' || typeof value.event !== 'object' || value.event === null || typeof value.event.type !== 'string') {
    throw new DeserializationError(`inbox entry ${seq} of actor ${id} is not a signal ({ event: { type }, dedupeKey }): the key holds data another program wrote; discard it`);
  }
  return { seq, event: value.event as InboxEntry['event'], dedupeKey: value.dedupeKey };
}

/** An inbox from its stored entries (seq -> bytes, in any order) and its seq: entries oldest first. */
export function inboxOf(id: string, seq: number, entries: Iterable<readonly [seq: number, bytes: Uint8Array]>): Inbox {
  const read = [...entries].sort(([a], [b]) => a - b).map(([at, bytes]) => decodeInboxEntry(id, at, bytes));
  return { entries: read, seq };
}

/**
 * The entry `signal` left at `seq` in actor `to`'s inbox, as a read of that inbox gives it (through
 * the same bytes): a commit's receipt of the signals it landed (`CommitOptions.delivered`).
 */
export function deliveredEntry(to: string, seq: number, signal: Signal | undefined): InboxEntry {
  if (signal === undefined) throw new XreactorError('script_reply_invalid', `a commit's receipt names a signal it did not send (landed on ${to} at seq ${seq})`);
  return decodeInboxEntry(to, seq, encodeInboxEntry(signal));
}
