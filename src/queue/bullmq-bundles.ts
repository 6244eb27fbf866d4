/**
 * Bundles: how the BullMQ adapter carries the sibling jobs of one fan-out throw (an
 * `enqueue(jobs, { bundle: true })` call) in fewer BullMQ jobs. BullMQ's own work per job (its add,
 * its fetch, its completion: about 40 Redis commands and a fifth of a worker's CPU for a map
 * element) is then paid once per bundle; every part is still handled as its own job.
 *
 * - A throw of n jobs becomes ceil(n / bundleSize) bundles of sizes that differ by at most one,
 *   in the jobs' order, so the same call made again with the same bundle size (an effect
 *   performed again after a crash) makes the same bundles under the same ids, and BullMQ adds none
 *   of them twice. Made with another bundle size (a worker started with another `--bundle-size`),
 *   the bundles differ and are added again: their parts find their actors moved on.
 * - A bundle's BullMQ id is `%b<parts>-<digest>.<first part's encoded id>`, the digest taken over
 *   every part's id: a list that differs in any part (a sweeper's re-dispatch computed from the
 *   store's state, performed again after the state moved) gets another id, and is not dropped as
 *   a duplicate. `%b` starts no encoded job id (`encodeJobId` writes `%` only as `%25`, `%3A` or a
 *   leading `%i`).
 * - The consumer runs a bundle's parts at once, each under a permit of the worker-wide
 *   {@link Permits} (as many as the consumer's concurrency), so `concurrency` still bounds the
 *   handlers running.
 */
import { createHash } from 'node:crypto';

/**
 * Parts per bundle when `bundleSize` is not given (and no consumer of the queue in this process
 * handles fewer at once): a throw of 50 travels in 5 BullMQ jobs. Ten rather than five shortened
 * a 1,000-element fan-out map by about a tenth forward and forward + rollback, with one worker and
 * with four (docs/performance.md, session 24): fewer BullMQ jobs per element, a shorter enqueue at
 * each throw boundary (the map's critical path), more elements' commits per group-commit call.
 * Larger bundles leave fewer jobs per throw to share among workers.
 */
export const DEFAULT_BUNDLE_SIZE = 10;

/** The sizes of the bundles `count` jobs are cut into, at most `bundleSize` each, in order. */
export function bundleSizes(count: number, bundleSize: number): number[] {
  if (count <= 0) return [];
  const bundles = Math.ceil(count / Math.max(1, bundleSize));
  const base = Math.floor(count / bundles);
  const larger = count % bundles;
  return Array.from({ length: bundles }, (_, i) => base + (i < larger ? 1 : 0));
}

/** The BullMQ id of a bundle of jobs with these encoded ids, in order. */
export function bundleJobId(encodedIds: readonly string[]): string {
  const digest = createHash('sha1').update(encodedIds.join('\n')).digest('hex').slice(0, 12);
  return `%b${encodedIds.length}-${digest}.${encodedIds[0] ?? ''}`;
}

/** A counting semaphore: at most `size` holders at once, waiters served first come, first served. */
export class Permits {
  readonly #waiting: (() => void)[] = [];
  #free: number;

  constructor(size: number) {
    this.#free = Math.max(1, size);
  }

  /** Permits free now (0 while any work waits for one). */
  get free(): number {
    return this.#free;
  }

  /** Run `work` under a permit. */
  async with<T>(work: () => Promise<T>): Promise<T> {
    if (this.#free > 0) this.#free -= 1;
    else await new Promise<void>((resolve) => this.#waiting.push(resolve));
    try {
      return await work();
    } finally {
      const next = this.#waiting.shift();
      if (next === undefined) this.#free += 1;
      else next();
    }
  }
}
