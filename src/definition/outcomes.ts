/**
 * Step outcomes other than a plain returned value. A step body (or a
 * compensate / undo handler) returns one of these to end with that outcome.
 */

const OUTCOME = Symbol.for('xreactor.outcome');

/** A step failure. `retry: false` vetoes further attempts (it can never grant extra ones). */
export interface Fail {
  readonly [OUTCOME]: 'fail';
  readonly error: unknown;
  readonly retry: boolean | undefined;
}

/** A clean stop: no further steps run and nothing is rolled back. */
export interface Halt {
  readonly [OUTCOME]: 'halt';
  readonly reason: string;
}

/** The step is skipped with a value: dependants see the value, it is never undone. */
export interface Skip<T> {
  readonly [OUTCOME]: 'skip';
  readonly value: T;
}

/** Any non-value outcome. */
export type Outcome = Fail | Halt | Skip<unknown>;

/**
 * Fail the step. The step is compensated (its body started) and completed
 * steps are undone, after any retries its policy allows.
 * @example
 * run: async ({ amount }) => (amount > 100 ? fail(new Error('over limit'), { retry: false }) : charge(amount))
 */
export function fail(error: unknown, options: { retry?: boolean } = {}): Fail {
  return { [OUTCOME]: 'fail', error, retry: options.retry };
}

/**
 * Stop the run cleanly without rollback; the run ends `halted`.
 * @example
 * run: ({ order }) => (order.cancelled ? halt('order was cancelled') : order)
 */
export function halt(reason: string): Halt {
  return { [OUTCOME]: 'halt', reason };
}

/**
 * Skip the step with a value. The run continues as for a success, but the
 * step is never undone.
 * @example
 * run: ({ cached }) => (cached ? skip(cached) : compute())
 */
export function skip<T>(value: T): Skip<T>;
export function skip(): Skip<undefined>;
export function skip<T>(value?: T): Skip<T | undefined> {
  return { [OUTCOME]: 'skip', value };
}

/** Whether `value` is an outcome built by {@link fail}, {@link halt} or {@link skip}. */
export function isOutcome(value: unknown): value is Outcome {
  return typeof value === 'object' && value !== null && OUTCOME in value;
}

/** The outcome's kind. */
export function outcomeKind(outcome: Outcome): Outcome[typeof OUTCOME] {
  return outcome[OUTCOME];
}

/** The value type a step produces when its body returns `R`. */
export type StepValue<R> = R extends Skip<infer V> ? V : R extends Fail | Halt ? never : R;
