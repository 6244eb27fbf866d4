import { DefinitionError } from '../errors/index.js';

/** How the delay between attempts grows. */
export type Backoff = 'exponential' | 'linear' | 'fixed';

/** Retry options a user writes. All optional. */
export interface RetryOptions {
  /**
   * Total attempts, including the first.
   * @defaultValue 3
   */
  readonly maxAttempts?: number;
  /**
   * Growth of the delay: exponential (base·2^(n-1)), linear (base·n) or fixed (base).
   * @defaultValue 'exponential'
   */
  readonly backoff?: Backoff;
  /**
   * Delay unit in milliseconds.
   * @defaultValue 1000
   */
  readonly baseDelayMs?: number;
}

/** A compiled retry policy with every default filled in. */
export interface RetryPolicy {
  readonly maxAttempts: number;
  readonly backoff: Backoff;
  readonly baseDelayMs: number;
}

/** The policy of a step that declares no retries: one attempt. */
export const NO_RETRY: RetryPolicy = Object.freeze({ maxAttempts: 1, backoff: 'exponential', baseDelayMs: 0 });

const BACKOFFS: readonly Backoff[] = ['exponential', 'linear', 'fixed'];

/**
 * Fill the defaults of a retry declaration and check it.
 * @param where - names the reactor/step for the error message.
 */
export function compileRetryOptions(options: RetryOptions | undefined, where: string): RetryPolicy {
  if (options === undefined) return NO_RETRY;
  const maxAttempts = options.maxAttempts ?? 3;
  const backoff = options.backoff ?? 'exponential';
  const baseDelayMs = options.baseDelayMs ?? 1000;
  if (!Number.isInteger(maxAttempts) || maxAttempts < 1) {
    throw new DefinitionError(`${where}: retries.maxAttempts must be a positive integer, got ${JSON.stringify(maxAttempts)}`);
  }
  if (!BACKOFFS.includes(backoff)) {
    throw new DefinitionError(
      `${where}: retries.backoff must be one of ${BACKOFFS.join(', ')}, got ${JSON.stringify(backoff)}`,
    );
  }
  if (typeof baseDelayMs !== 'number' || !Number.isFinite(baseDelayMs) || baseDelayMs < 0) {
    throw new DefinitionError(`${where}: retries.baseDelayMs must be a finite number >= 0, got ${typeof baseDelayMs === 'number' ? String(baseDelayMs) : JSON.stringify(baseDelayMs)}`);
  }
  return Object.freeze({ maxAttempts, backoff, baseDelayMs });
}

/** Delay before attempt `failedAttempt + 1`, after attempt `failedAttempt` (1-based) failed. */
export function backoffDelayMs(policy: RetryPolicy, failedAttempt: number): number {
  switch (policy.backoff) {
    case 'exponential':
      return policy.baseDelayMs * 2 ** (failedAttempt - 1);
    case 'linear':
      return policy.baseDelayMs * failedAttempt;
    case 'fixed':
      return policy.baseDelayMs;
  }
}
