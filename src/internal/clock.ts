/** Time, injected: runtime code never reads the system clock or sets timers directly. */
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  /** Resolve after `ms` milliseconds, or reject with the signal's reason when it fires first. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
  /** Call `fn` every `ms` milliseconds until the returned function is called. Never keeps the process alive. */
  every(ms: number, fn: () => void): () => void;
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
};
