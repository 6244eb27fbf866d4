/**
 * The machine registry: every kind of actor the runtime knows, with its machine, the version it
 * writes, the versions it can read, and the tags of its states. The stored envelope names kind and
 * version; loading a kind or version missing here is a retryable error (a newer build may know it).
 * One file per kind beside this one (`execution.ts`, `map.ts`, `element-rollback.ts`, `unit.ts`).
 */
import { createExecutionMachine, EXECUTION_MACHINE_READABLE, EXECUTION_MACHINE_VERSION, executionStatusOf, executionTagsOf, upgradeExecutionContext } from './execution.js';
import { createMapMachine, MAP_MACHINE_VERSION, mapStatusOf, mapTagsOf, mapUndoSettled } from './map.js';
import { createElementRollbackMachine, ELEMENT_ROLLBACK_MACHINE_VERSION, elementRollbackStatusOf, elementRollbackTagsOf } from './element-rollback.js';
import { createUnitMachine, UNIT_MACHINE_VERSION, unitStatusOf, unitTagsOf } from './unit.js';
import type { ActorStatus, ActorTag } from './registry-types.js';

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
  /** The status a commit of a stored state value stores (`Commit.status`). */
  readonly statusOf: (value: unknown) => ActorStatus;
  /**
   * Whether a stored state value is the end of an undo: what an actor waiting for this one to be
   * undone waits for. (A settled state that is not one, such as a map's forward `failed`, still
   * has the undo ahead of it.)
   */
  readonly undoSettledOf: (value: unknown) => boolean;
}

/** An execution's undo ended: it settled `failed` or `cancelled` (completed, halted or aborted ones still have the undo in their inbox). */
function executionUndoSettledOf(value: unknown): boolean {
  const status = executionStatusOf(value);
  return executionTagsOf(value).has('settled') && (status === 'cancelled' || status === 'failed');
}

/** Every actor kind, by name. */
export const MACHINE_REGISTRY = {
  execution: {
    kind: 'execution',
    version: EXECUTION_MACHINE_VERSION,
    readable: EXECUTION_MACHINE_READABLE,
    machine: createExecutionMachine,
    tagsOf: executionTagsOf,
    statusOf: executionStatusOf,
    undoSettledOf: executionUndoSettledOf,
  },
  map: {
    kind: 'map',
    version: MAP_MACHINE_VERSION,
    readable: [MAP_MACHINE_VERSION],
    machine: createMapMachine,
    tagsOf: mapTagsOf,
    statusOf: mapStatusOf,
    undoSettledOf: mapUndoSettled,
  },
  'element-rollback': {
    kind: 'element-rollback',
    version: ELEMENT_ROLLBACK_MACHINE_VERSION,
    readable: [ELEMENT_ROLLBACK_MACHINE_VERSION],
    machine: createElementRollbackMachine,
    tagsOf: elementRollbackTagsOf,
    statusOf: elementRollbackStatusOf,
    // A rollback actor is never undone: its report is its end.
    undoSettledOf: (value: unknown) => elementRollbackTagsOf(value).has('settled'),
  },
  unit: {
    kind: 'unit',
    version: UNIT_MACHINE_VERSION,
    readable: [UNIT_MACHINE_VERSION],
    machine: createUnitMachine,
    tagsOf: unitTagsOf,
    statusOf: unitStatusOf,
    // An async unit is never undone: its settle is its end.
    undoSettledOf: (value: unknown) => unitTagsOf(value).has('settled'),
  },
} as const satisfies Readonly<Record<string, ActorKindEntry>>;

/** A registered actor kind's name. */
export type ActorKind = keyof typeof MACHINE_REGISTRY;

const NO_TAGS: ReadonlySet<ActorTag> = new Set();

/** The registry entry of actor kind `kind`, or undefined for a kind this build does not know. */
function entryOf(kind: string): ActorKindEntry | undefined {
  return (MACHINE_REGISTRY as Readonly<Record<string, ActorKindEntry | undefined>>)[kind];
}

/** The tags of a stored state value of actor kind `kind` (none for a kind this build does not know). */
export function tagsOf(kind: string, value: unknown): ReadonlySet<ActorTag> {
  return entryOf(kind)?.tagsOf(value) ?? NO_TAGS;
}

/** The status of a stored state value of actor kind `kind` (undefined for a kind this build does not know). */
export function statusOf(kind: string, value: unknown): ActorStatus | undefined {
  return entryOf(kind)?.statusOf(value);
}

/** Whether a stored state value of actor kind `kind` is the end of its undo (false for a kind this build does not know). */
export function undoSettledOf(kind: string, value: unknown): boolean {
  return entryOf(kind)?.undoSettledOf(value) ?? false;
}

/**
 * A stored context of kind `kind` as this build's machine has it: an execution context of an
 * older readable version is brought to the current one (`upgradeExecutionContext`); others are
 * returned as they are. Applied as a snapshot is read, so every reader sees one shape.
 */
export function upgradeStoredContext(kind: string, context: unknown): unknown {
  return kind === 'execution' && typeof context === 'object' && context !== null ? upgradeExecutionContext(context) : context;
}

/** Kind → the machine versions this build can load: what the stores accept by default. */
export function readableMachines(): Readonly<Record<string, readonly number[]>> {
  return Object.freeze(Object.fromEntries(Object.values(MACHINE_REGISTRY).map((entry) => [entry.kind, entry.readable])));
}
