/** Time, injected: runtime code never reads the system clock or sets timers directly. */
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  /** Resolve after `ms` milliseconds, or reject with the signal's reason when it fires first. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
  /** Call `fn` every `ms` milliseconds until the returned function is called. Never keeps the process alive. */
  every(ms: number, fn: () => void): () => void;
  /**
   * Call `fn` once after `ms` milliseconds unless the returned function is called first (as
   * `sleep` does, without a promise and an abort signal per timer). Optional: without it,
   * {@link timeoutOrAbort} uses `sleep`.
   */
  after?(ms: number, fn: () => void): () => void;
}

/** The real clock. */
export const systemClock: Clock = {
  now: () => Date.now(),
  sleep: (ms, signal) =>
    new Promise<void>((resolve, reject) => {
      if (signal?.aborted) {
        reject(signal.reason as Error);
        return;
      }
      const onAbort = () => {
        clearTimeout(timer);
        reject(signal!.reason as Error);
      };
      const timer = setTimeout(() => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      }, ms);
      signal?.addEventListener('abort', onAbort, { once: true });
    }),
  every: (ms, fn) => {
    const timer = setInterval(fn, ms);
    timer.unref();
    return () => clearInterval(timer);
  },
  after: (ms, fn) => {
    const timer = setTimeout(fn, ms);
    return () => clearTimeout(timer);
  },
};

/**
 * The reason of an abort that ends a wait this code no longer needs. Aborting without a reason
 * builds a DOMException (with its stack trace) every time; on a path taken once per awaited run
 * that showed in profiles.
 */
export const WAIT_OVER: Error = new Error('the wait is over');

/**
 * Call `onEnd` after `ms` on `clock`, or as soon as `signal` aborts, whichever comes first; the
 * returned function cancels both (it is safe to call more than once). One timer and one listener:
 * no composite signal (`AbortSignal.any`) per wait.
 */
export function timeoutOrAbort(clock: Clock, ms: number, signal: AbortSignal | undefined, onEnd: () => void): () => void {
  signal?.addEventListener('abort', onEnd, { once: true });
  if (clock.after !== undefined) {
    const cancel = clock.after(ms, onEnd);
    return () => {
      signal?.removeEventListener('abort', onEnd);
      cancel();
    };
  }
  const timer = new AbortController();
  clock.sleep(ms, timer.signal).then(onEnd, noop);
  return () => {
    signal?.removeEventListener('abort', onEnd);
    timer.abort(WAIT_OVER);
  };
}

function noop(): void {}
