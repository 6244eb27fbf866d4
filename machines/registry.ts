/**
 * The machine registry: every kind of actor the runtime knows, with its machine, the version it
 * writes, the versions it can read, and the tags of its states. The stored envelope names kind and
 * version; loading a kind or version missing here is a retryable error (a newer build may know it).
 * One file per kind beside this one (`execution.ts`; later map operations, element rollbacks,
 * async units).
 */
import { createExecutionMachine, EXECUTION_MACHINE_VERSION, executionTagsOf } from './execution.js';
import type { ActorTag } from './registry-types.js';

/** One kind of actor. */
export interface ActorKindEntry {
  readonly kind: string;
  /** The machine version this build writes. */
  readonly version: number;
  /** The machine versions this build can load (and resume). */
  readonly readable: readonly number[];
  /** Build the machine (an execution's depends on its reactor's plan). */
  readonly machine: (...args: never[]) => unknown;
  /** Tags of a stored state value, as the machine's state nodes declare them. */
  readonly tagsOf: (value: unknown) => ReadonlySet<ActorTag>;
}

/** Every actor kind, by name. */
export const MACHINE_REGISTRY = {
  execution: { kind: 'execution', version: EXECUTION_MACHINE_VERSION, readable: [EXECUTION_MACHINE_VERSION], machine: createExecutionMachine, tagsOf: executionTagsOf },
} as const satisfies Readonly<Record<string, ActorKindEntry>>;

/** A registered actor kind's name. */
export type ActorKind = keyof typeof MACHINE_REGISTRY;

const NO_TAGS: ReadonlySet<ActorTag> = new Set();

/** The tags of a stored state value of actor kind `kind` (none for a kind this build does not know). */
export function tagsOf(kind: string, value: unknown): ReadonlySet<ActorTag> {
  const entry = (MACHINE_REGISTRY as Readonly<Record<string, ActorKindEntry | undefined>>)[kind];
  return entry === undefined ? NO_TAGS : entry.tagsOf(value);
}

/** Kind → the machine versions this build can load: what the stores accept by default. */
export function readableMachines(): Readonly<Record<string, readonly number[]>> {
  return Object.freeze(Object.fromEntries(Object.values(MACHINE_REGISTRY).map((entry) => [entry.kind, entry.readable])));
}
