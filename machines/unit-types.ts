import type { RetryPolicy } from '../src/definition/retry.js';
import type { ErrorData } from '../src/internal/error-data.js';
import type { RollbackFailure, TraceEntry } from './execution-types.js';

/** Version of the async-unit machine; stored with every snapshot of kind `unit`. */
export const UNIT_MACHINE_VERSION = 1;

/** How an async step's unit ended (its value, when completed, is stored as its result `value`). */
export type UnitEnd =
  | { readonly status: 'completed' }
  | { readonly status: 'failed'; readonly error: ErrorData }
  | { readonly status: 'halted'; readonly reason: string };

/** The compensation a unit ran after its last attempt failed (seed 001 §2.5: once, in its own job). */
export interface UnitCompensation {
  /** `skipped`: the step declares no compensate. */
  readonly status: 'completed' | 'failed' | 'skipped';
  readonly failure: RollbackFailure | null;
}

/**
 * The async unit actor's context (kind `unit`): one `asyncStep`'s body, run in its own job, with
 * its retries, its compensation and its end. Constant size; the value is a result of its own.
 */
export interface UnitContext {
  readonly unitId: string;
  /** The execution that dispatched it (signalled once when it settles). */
  readonly owner: string;
  /** The owner's compose path (hooks name the unit's step with it). */
  readonly ownerPath: readonly string[];
  /** The owner's reactor, at the version and plan it started with: where the step's body is. */
  readonly reactor: string;
  readonly version: number;
  readonly fingerprint: string;
  readonly step: string;
  /** 1-based attempt of the body. */
  readonly attempt: number;
  /** The step's retry policy, stored at dispatch: a unit keeps the policy it was dispatched with. */
  readonly retry: RetryPolicy;
  /** The last failed attempt's error, while it is compensated. */
  readonly failure: ErrorData | null;
  readonly end: UnitEnd | null;
  readonly compensation: UnitCompensation | null;
  readonly dispatchedAt: number;
  readonly updatedAt: number;
}

/** Input that creates a unit actor. */
export type UnitInput = Pick<UnitContext, 'unitId' | 'owner' | 'ownerPath' | 'reactor' | 'version' | 'fingerprint' | 'step' | 'retry'> & { readonly at: number };

/** Events the unit actor accepts. Every event carries the host's clock reading. */
export type UnitEvent =
  /** Its job took it up. */
  | { readonly type: 'xreactor.unit.start'; readonly at: number }
  | { readonly type: 'xreactor.unit.succeeded'; readonly at: number; readonly attempt: number; readonly value: unknown }
  | { readonly type: 'xreactor.unit.halted'; readonly at: number; readonly attempt: number; readonly reason: string }
  | {
      readonly type: 'xreactor.unit.failed';
      readonly at: number;
      readonly attempt: number;
      readonly error: ErrorData;
      /** The body started (its input contract passed). */
      readonly started: boolean;
      readonly retryable: boolean;
    }
  /** The backoff after failed attempt `attempt` is over. */
  | { readonly type: 'xreactor.timer.fired'; readonly at: number; readonly attempt: number }
  | { readonly type: 'xreactor.unit.compensated'; readonly at: number; readonly failure: Omit<RollbackFailure, 'step' | 'kind'> | null; readonly skipped: boolean };

/** The signal a unit sends its owner, once, when it settles. */
export interface UnitSettledSignal {
  readonly type: 'xreactor.unit.settled';
  readonly at: number;
  /** The unit's id (an async reactor's child sends its execution id). */
  readonly child: string;
}

/** Store writes a unit transition asks for. */
export type UnitWrite =
  | { readonly type: 'xreactor.write.result'; readonly params: { readonly step: 'value'; readonly value: unknown } }
  | { readonly type: 'xreactor.write.trace'; readonly params: TraceEntry }
  | { readonly type: 'xreactor.write.signal'; readonly params: { readonly to: string; readonly event: UnitSettledSignal; readonly dedupeKey: string } };

/** Effects a unit transition asks the host to perform after the commit. */
export type UnitEffect =
  | { readonly type: 'xreactor.effect.unit.start'; readonly params: Record<string, never> }
  | { readonly type: 'xreactor.effect.unit.run'; readonly params: { readonly attempt: number } }
  | { readonly type: 'xreactor.effect.unit.wait'; readonly params: { readonly attempt: number; readonly delayMs: number; readonly error: ErrorData } }
  | { readonly type: 'xreactor.effect.unit.compensate'; readonly params: { readonly attempt: number; readonly error: ErrorData } }
  | { readonly type: 'xreactor.effect.finished'; readonly params: { readonly status: UnitStatus } };

/** Lifecycle statuses a unit's commits store. */
export type UnitStatus = 'queued' | 'running' | 'completed' | 'failed' | 'halted';
