/**
 * The stored form of an execution snapshot: an envelope (`src/serialization/envelope.ts`) of kind
 * {@link SNAPSHOT_KIND} around `{ value, context }`, marked with the machine version. Every adapter
 * stores exactly the bytes {@link encodeSnapshot} produces, so a caller holding those bytes (a job
 * carrying a handed-off run) can fence a commit on them (`CommitOptions.ifSnapshot`).
 */
import { EXECUTION_MACHINE_VERSION } from '../../machines/execution-types.js';
import { DeserializationError } from '../errors/index.js';
import { decodeEnvelope, encodeEnvelope } from '../serialization/index.js';
import type { PersistedSnapshot } from './store.js';

/** Envelope kind of a stored execution snapshot (every adapter uses it). */
export const SNAPSHOT_KIND = 'execution';

/**
 * The envelope bytes of a snapshot, exactly as every store keeps them.
 * @throws DefinitionError when the machine version is not a non-negative integer.
 */
export function encodeSnapshot(snapshot: PersistedSnapshot): Uint8Array {
  return encodeEnvelope(SNAPSHOT_KIND, snapshot.machineVersion, { value: snapshot.value, context: snapshot.context });
}

/**
 * Reads the envelope bytes of a snapshot (as {@link encodeSnapshot} wrote them), with the same
 * checks `Store.load` makes.
 * @param machineVersions - the machine versions this build can load; default `[EXECUTION_MACHINE_VERSION]`.
 * @throws DeserializationError when the bytes are truncated or foreign, hold another kind of
 * record or a payload that is not `{ value, context }`, or carry a machine version not in
 * `machineVersions` (the message says which, and what to do).
 */
export function decodeSnapshot(bytes: Uint8Array, machineVersions: readonly number[] = [EXECUTION_MACHINE_VERSION]): PersistedSnapshot {
  const { machineVersion, payload } = decodeEnvelope(bytes, { kind: SNAPSHOT_KIND, machineVersions });
  if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) {
    throw new DeserializationError(
      `stored ${SNAPSHOT_KIND} snapshot holds ${payload === null ? 'null' : Array.isArray(payload) ? 'an array' : `a ${typeof payload}`}, not { value, context }: ` +
        'the key holds data another program wrote; discard it',
    );
  }
  const { value, context } = payload as { value: unknown; context: unknown };
  return { kind: SNAPSHOT_KIND, machineVersion, value, context };
}
