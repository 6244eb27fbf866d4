/**
 * The settled notification's message on Redis, as `settledMessage` in
 * `lua/includes/fencedCommit.lua` builds it. Either the execution id alone (a settle announced
 * without results, a notice too large, a build before notices) or a notice:
 *
 *   "\0xr1" | revision u32 | snapshot length u32 | snapshot bytes | result count u16 |
 *   per result: name length u16 | name (UTF-8) | value length u32 | value bytes
 *
 * (integers big-endian; the snapshot as stored, an envelope; values as stored, msgpack).
 */
import { DeserializationError } from '../errors/index.js';
import { decodeLoadedResults } from './results-codec.js';
import { decodeSnapshot } from './snapshot-codec.js';
import type { MachineVersions } from './snapshot-codec.js';
import type { SettledNotice } from './store.js';

const MAGIC = Buffer.from('\0xr1', 'latin1');

/**
 * The notice a message carries, or undefined when it carries none or cannot be read: truncated,
 * or a snapshot or result this build cannot decode (the waiter then loads the actor, as it would
 * without notices, and the load reports what is wrong).
 */
export function readSettledNotice(message: Buffer, machines: MachineVersions): SettledNotice | undefined {
  if (message.length < MAGIC.length + 10 || !message.subarray(0, MAGIC.length).equals(MAGIC)) return undefined;
  try {
    let at = MAGIC.length;
    const revision = message.readUInt32BE(at);
    const snapshotLength = message.readUInt32BE(at + 4);
    at += 8;
    const snapshot = decodeSnapshot(message.subarray(at, at + snapshotLength), machines);
    at += snapshotLength;
    const count = message.readUInt16BE(at);
    at += 2;
    const stored: [string, Buffer][] = [];
    for (let i = 0; i < count; i++) {
      const nameLength = message.readUInt16BE(at);
      const name = message.toString('utf8', at + 2, at + 2 + nameLength);
      at += 2 + nameLength;
      const valueLength = message.readUInt32BE(at);
      stored.push([name, message.subarray(at + 4, at + 4 + valueLength)]);
      at += 4 + valueLength;
    }
    if (at !== message.length) return undefined;
    const results = decodeLoadedResults(stored);
    return results === undefined ? undefined : { snapshot, revision, results };
  } catch (error) {
    // Truncated, or a snapshot this build cannot read: the load that follows reports it.
    if (error instanceof RangeError || error instanceof DeserializationError) return undefined;
    throw error;
  }
}
