/**
 * The stored form of an actor snapshot: an envelope (`src/serialization/envelope.ts`) of the
 * actor's kind (`PersistedSnapshot.kind`: `'execution'`, ...) around `{ value, context }`,
 * marked with the machine version. Every adapter stores exactly the bytes {@link encodeSnapshot}
 * produces, so a caller holding those bytes (a job carrying a handed-off run) can fence a commit
 * on them (`CommitOptions.ifSnapshot`).
 */
import { MACHINE_REGISTRY, readableMachines, upgradeStoredContext } from '../../machines/registry.js';
import { DeserializationError } from '../errors/index.js';
import { decodeEnvelope, encodeEnvelope } from '../serialization/index.js';
import type { PersistedSnapshot } from './store.js';

/** The machine version this build writes for `kind` (0 for a kind it has no machine for). */
function currentVersionOf(kind: string): number {
  return (MACHINE_REGISTRY as Readonly<Record<string, { readonly version: number }>>)[kind]?.version ?? 0;
}

/** Envelope kind of a stored execution snapshot. */
export const SNAPSHOT_KIND = 'execution';

/** Actor kind -> the machine versions of that kind a build can load. */
export type MachineVersions = Readonly<Record<string, readonly number[]>>;

/** What a build loads by default: every registered actor kind's readable machine versions (machines/registry.ts). */
export const DEFAULT_MACHINES: MachineVersions = readableMachines();

/**
 * Bytes already encoded, by snapshot object: a snapshot is encoded for its commit and, the same
 * object, for the job that carries it (a hand-off, a queued element's or rollback actor's start).
 * Snapshots are never changed once built (XState snapshots and the persisted objects around them
 * are immutable), and the bytes are never written to (every user copies or sends them).
 */
const encodedSnapshots = new WeakMap<PersistedSnapshot, Uint8Array>();

/**
 * The envelope bytes of a snapshot, exactly as every store keeps them (encoded once per snapshot object).
 * @throws DefinitionError when the kind is empty or the machine version is not a non-negative integer.
 */
export function encodeSnapshot(snapshot: PersistedSnapshot): Uint8Array {
  let bytes = encodedSnapshots.get(snapshot);
  if (bytes === undefined) {
    bytes = encodeEnvelope(snapshot.kind, snapshot.machineVersion, { value: snapshot.value, context: snapshot.context });
    encodedSnapshots.set(snapshot, bytes);
  }
  return bytes;
}

/**
 * Reads the envelope bytes of a snapshot (as {@link encodeSnapshot} wrote them), with the same
 * checks `Store.load` makes.
 * @param machines - actor kind -> the machine versions this build can load; default {@link DEFAULT_MACHINES}.
 * @throws DeserializationError when the bytes are truncated or foreign, or hold a payload that is
 * not `{ value, context }` (not retryable); or when the envelope's kind is not in `machines`, or its
 * machine version is not listed for its kind (retryable: a build that knows it can advance the
 * actor). The message says which, and what to do.
 */
export function decodeSnapshot(bytes: Uint8Array, machines: MachineVersions = DEFAULT_MACHINES): PersistedSnapshot {
  const { kind, machineVersion, payload } = decodeEnvelope(bytes, { machines });
  if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) {
    throw new DeserializationError(
      `stored ${kind} snapshot holds ${payload === null ? 'null' : Array.isArray(payload) ? 'an array' : `a ${typeof payload}`}, not { value, context }: ` +
        'the key holds data another program wrote; discard it',
    );
  }
  const { value, context } = payload as { value: unknown; context: unknown };
  // An older readable version's context in the current shape (the version stays as stored).
  return { kind, machineVersion, value, context: machineVersion < currentVersionOf(kind) ? upgradeStoredContext(kind, context) : context };
}
