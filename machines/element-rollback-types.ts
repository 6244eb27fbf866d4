import type { RollbackFailure } from './execution-types.js';
import type { MapEvent, MapMode, RollbackOutcome, SignalCondition } from './map-types.js';

/** Version of the element-rollback machine; stored with every snapshot of kind `element-rollback`. */
export const ELEMENT_ROLLBACK_MACHINE_VERSION = 1;

/** The element-rollback actor's context: one started element's rollback, constant size but for that element's failures. */
export interface ElementRollbackContext {
  readonly id: string;
  readonly map: string;
  /** The map step's name (the owner's step): failures are named and pathed by it. */
  readonly step: string;
  readonly element: string;
  readonly position: number;
  readonly index: number;
  readonly throw: number;
  readonly lastOfThrow: boolean;
  readonly mode: MapMode;
  /** The current resolve (1-based, never reused: its timer job is named by it). */
  readonly attempt: number;
  /** Lease checks that found the element's lease held, in the current round. */
  readonly contended: number;
  /** `lockSnoozeMaxAttempts`, copied at spawn: lease checks before `element_in_flight`. */
  readonly maxAttempts: number;
  /** Undo signals sent to the element so far (a second one follows an undo the element aborted). */
  readonly undos: number;
  /** While parked: when its wake is due (the sweeper delivers `rollback.retry` itself when that job is lost). */
  readonly parkedUntil: number | null;
  readonly outcome: RollbackOutcome | null;
  /** The element's rollback failures (pathed `[step, '<index>', …]`), or the one failure of an element in flight or gone. */
  readonly failures: readonly RollbackFailure[];
  readonly createdAt: number;
  readonly updatedAt: number;
}

/** Input that creates an element-rollback actor. */
export type ElementRollbackInput = Pick<ElementRollbackContext, 'id' | 'map' | 'step' | 'element' | 'position' | 'index' | 'throw' | 'lastOfThrow' | 'mode' | 'maxAttempts'> & { readonly at: number };

/** Events the element-rollback actor accepts. Every event carries the host's clock reading. */
export type ElementRollbackEvent =
  /** The element ended `failed`, `halted` or `cancelled`: it has nothing to undo. */
  | { readonly type: 'xreactor.rollback.notNeeded'; readonly at: number; readonly attempt: number }
  /** The element is gone (its retention expired). */
  | { readonly type: 'xreactor.rollback.unavailable'; readonly at: number; readonly attempt: number }
  /** The element (completed or aborted) is leased by another process; `delayMs` is the snooze the host drew. */
  | { readonly type: 'xreactor.rollback.contended'; readonly at: number; readonly attempt: number; readonly delayMs: number }
  /** The element (completed or aborted) is free: it is told to undo itself. */
  | { readonly type: 'xreactor.rollback.undo'; readonly at: number; readonly attempt: number }
  /** The snooze of `attempt` is over. */
  | { readonly type: 'xreactor.rollback.retry'; readonly at: number; readonly attempt: number }
  /** Signal from the element: its undo ended (`cancelled`; `aborted` when it was interrupted). */
  | { readonly type: 'xreactor.child.settled'; readonly at: number; readonly child: string; readonly status: string; readonly rollbackFailures?: readonly RollbackFailure[] }
  /** The element is gone while it was being undone: reported by the sweeper. */
  | { readonly type: 'xreactor.child.lost'; readonly at: number; readonly child: string };

/** Events the element-rollback actor sends: the undo to its element, the conditional signals to its map. */
export type ElementRollbackSignalEvent =
  | { readonly type: 'xreactor.operator.undo'; readonly at: number; readonly from: string }
  | Extract<MapEvent, { type: 'xreactor.map.rollbackThrowSettled' | 'xreactor.map.rolledBack' }>;

/** Store writes an element-rollback transition asks for; committed atomically with the snapshot. */
export type ElementRollbackWrite =
  /** The position's outcome (first writer wins), its failures onto the map's `rbfail` list, the counters. */
  | {
      readonly type: 'xreactor.write.map.rollbackReport';
      readonly params: {
        readonly map: string;
        readonly position: number;
        readonly index: number;
        readonly outcome: RollbackOutcome;
        readonly failures: readonly RollbackFailure[];
        readonly throw: number;
        readonly lastOfThrow: boolean;
      };
    }
  | { readonly type: 'xreactor.write.signal'; readonly params: { readonly to: string; readonly event: ElementRollbackSignalEvent; readonly dedupeKey: string; readonly condition?: SignalCondition } }
  | { readonly type: 'xreactor.write.awaits'; readonly params: { readonly actors: readonly string[] } };

/** Effects an element-rollback transition asks the host to perform after the commit. */
export type ElementRollbackEffect =
  /** Load the element and check its lease: `rollback.notNeeded`, `.unavailable`, `.contended` or `.undo`. */
  | { readonly type: 'xreactor.effect.rollback.resolve'; readonly params: { readonly element: string; readonly attempt: number } }
  /** A delayed job `<id>.timer.<attempt>` delivering `rollback.retry { attempt }` (in a caller: sleep on the clock). */
  | { readonly type: 'xreactor.effect.wait'; readonly params: { readonly attempt: number; readonly delayMs: number } }
  | { readonly type: 'xreactor.effect.awaitChild'; readonly params: { readonly child: string } }
  | { readonly type: 'xreactor.effect.finished'; readonly params: { readonly status: ElementRollbackStatus } };

/** The element-rollback actor's stored status. */
export type ElementRollbackStatus = 'running' | 'completed';
